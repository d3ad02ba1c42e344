"""Where requests come in: the HTTP routes by group, their request dependencies (``deps``) and bodies
(``schemas``). A route checks its request, then writes through the ``TopicWriter`` port and reads the
device book; it never reaches a producer (the package's docstring says what each folder may import)."""
