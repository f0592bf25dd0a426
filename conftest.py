"""Lets `pytest suites/` run from a checkout without installing the package.

The plugin is normally loaded through its `pytest11` entry point. Naming it here as well (with
`pytest_plugins`) would raise "Plugin already registered under a different name" once the
package is installed, so this registers it only when nothing else has.
"""

import sys
from pathlib import Path


def pytest_addhooks(pluginmanager):
    # Historic hook: runs as this conftest loads, before the command line is parsed, so the
    # plugin registered here still gets pytest_addoption and pytest_configure.
    if pluginmanager.has_plugin("orbench"):
        return
    root = str(Path(__file__).resolve().parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    import orbench_pytest.plugin.hooks as plugin

    if not pluginmanager.is_registered(plugin):
        pluginmanager.register(plugin, "orbench")
