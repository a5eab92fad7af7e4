"""Pure domain facts and helpers shared by every layer: no I/O, no clock, no settings."""
