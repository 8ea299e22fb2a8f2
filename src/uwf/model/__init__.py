"""The thread model: chains of StartNode and StepNodes, read through the backend.

Below both the engine and the agent kit, so that the two are independent siblings.
"""
