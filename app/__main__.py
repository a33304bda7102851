from app.cli import main

if __name__ == "__main__":  # a spawned worker imports this module too
    main()
