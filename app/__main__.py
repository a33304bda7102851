if __name__ == "__main__":  # a spawned backtest worker imports this module too: no CLI
    from app.cli import main

    main()
