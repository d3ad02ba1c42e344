"""What the command groups share: the admin API client (``admin_http``), the stack directory's layout
(``stack_dir``, which the dev packages read too) and the guard for a command needing an optional extra
(``needs``). Below ``groups/``: it imports no command.
"""
