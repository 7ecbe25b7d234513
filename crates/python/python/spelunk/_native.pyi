# Type stubs of the Rust extension (crates/python/src). Use the typed API of the `spelunk`
# package instead: these are its building blocks.
import os
from typing import Any, Dict, Optional, Union

__version__: str

class SampleStream:
    def __arrow_c_stream__(self, requested_schema: Optional[object] = None) -> object: ...

class NativeRecording:
    @property
    def path(self) -> str: ...
    def samples(self, batch_rows: int = 65536) -> SampleStream: ...
    def report(
        self, limit: int = 20, sort: str = "samples", c2c: bool = False, line_size: int = 64
    ) -> Dict[str, Any]: ...
    def c2c(self, line_size: int = 64, limit: int = 20) -> Dict[str, Any]: ...

def open(path: Union[str, "os.PathLike[str]"], ignore_sidecar: bool = False) -> NativeRecording: ...
