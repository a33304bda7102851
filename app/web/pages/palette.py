"""The phases' colours, the same on the dashboard and in ``phasewatch probe``'s table."""

# Okabe-Ito: told apart by every common kind of colour blindness.
PHASE_COLOURS = {
    "connect": "#E69F00",
    "network": "#56B4E9",
    "queue": "#D55E00",
    "prefill": "#009E73",
    "generation": "#CC79A7",
    "server": "#0072B2",
    "transfer": "#999999",
}
