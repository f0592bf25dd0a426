"""orbench-pytest: gate LLM changes on over-refusal and toxic acceptance, as pytest tests.

PYTEST_DONT_REWRITE: pytest rewrites the asserts of a plugin's package so that a plugin's
helpers fail with explained values. This package's asserts are internal invariants, never a
test's failure, so it opts out. That also makes runs independent of how pytest was started:
under the `pytest` script an editable install is imported unrewritten (pytest's rewriting
hook looks for modules on sys.path, and the checkout is on it only under `python -m pytest`),
and every later in-process session (pytester) then warned "Module already imported so cannot
be rewritten; orbench_pytest", which changed its outcomes.
"""

__version__ = "0.1.0"
