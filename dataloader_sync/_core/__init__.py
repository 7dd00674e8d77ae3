"""The loader and its futures: the only modules that touch their private fields.

``DataLoader``, ``Future`` and the modules around them (the loads, the batch
call, sync on demand, the value-cache tier the batch call drives, and the
process-level basics they stand on: ``_fork``, ``_time``). The rest of the
package sits beside this folder and imports from it; nothing here imports
from beside it (``tests/test_package_structure.py`` checks both, and that no
module outside this folder reads a private attribute of a class defined in
it).
"""
