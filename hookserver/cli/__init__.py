"""Command-line entry points: `hookserver serve` and `hookctl`."""
