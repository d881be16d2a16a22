"""What every host unit test here shares: run a module's unittest cases and end with the line
tests/run.sh reads, "N passed, N failed" (exit status 1 when a test failed or none ran)."""

import sys
import unittest


def main(module_name):
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[module_name])
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
    # A test with failing subtests is one failed test, however many subtests failed.
    failed = {getattr(test, "test_case", test).id() for test, _ in result.failures + result.errors}
    print(f"{result.testsRun - len(failed)} passed, {len(failed)} failed")
    sys.exit(1 if failed or not result.testsRun else 0)
