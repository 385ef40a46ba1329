"""The runtime model and the facts about a region it is fed: block work, TLB, cold lines, in-core bounds."""
