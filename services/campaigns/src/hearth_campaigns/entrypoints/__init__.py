"""Where the driver's work comes in: the campaign requests, the followed campaigns topic and journal, and
the tick that advances every campaign (``driver``). It drives ``service/``; nothing below imports it."""
