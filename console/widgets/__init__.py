"""The console's reusable widgets, one per module."""
