"""Players of Cold Iron: what a player may know, and how each decides."""
