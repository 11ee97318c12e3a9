"""hookserver: the node agent for Kubernetes colocation.

Layers, top to bottom (checked by import-linter, see .importlinter):
front doors and daemon > hooks | qos | predictor | executor > store > system.
"""

__all__: list[str] = []
__version__ = "0.1.0"
