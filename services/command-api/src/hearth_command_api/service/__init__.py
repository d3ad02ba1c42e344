"""What the API keeps and needs, free of I/O clients: the ports (``ports``) and the device book, a fold of
the journal in memory that the routes query (``device_book``). No web, broker or database import (an
import contract holds it), so the unit tests run it with fakes."""
