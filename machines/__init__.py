"""Machine descriptions: shipped TOML files, their validation, and host detection."""
from machines.loader import list_machines, load_machine, machine_to_dict, validate_machine_dict
from machines.model import OP_CLASSES, CacheLevel, Machine, OpCost, Parallel, Ram

__all__ = ["list_machines", "load_machine", "machine_to_dict", "validate_machine_dict", "OP_CLASSES",
           "CacheLevel", "Machine", "OpCost", "Parallel", "Ram"]
