"""The thread model: chains of StartNode and StepNodes, read through the backend.

Below both the engine and the agent kit, so that the two are independent siblings.
"""

# The package exports nothing here: one module per part of the model.
__all__: list[str] = []
