"""paddlefleet's stand-ins for the tests and tools run in the PaddleFormers environment: the library's own
(portcheck.forward.fleet), which `layers` on PaddleFormers folders installs too."""
from portcheck.forward.fleet import NOTICE, PROVIDER, GPTModelProvider, install, needed, prepare  # noqa: F401
