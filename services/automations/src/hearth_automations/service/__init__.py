"""What the service decides, free of I/O clients: the scheduler and the automation engine with their
rules, the notifier, and the state they share as one snapshot, each with the ports (Protocols) it writes
through. No web, broker or database import (an import contract holds it), so the unit tests run them
with fakes and a fake clock."""
