# Run rdma-core's own test suite (pyverbs' tests/) against one device and print one line per
# test, for tests/e2e/60-rdma-core-suite.sh, which runs this in a guest with `python3 -c`.
#
#   python3 -c "$(cat rdma-core-suite.py)" TESTS_DIR DEV [PER_TEST_SECONDS [REGEX]]
#
# REGEX: run only the tests whose id it matches (re.search).
#
# It loads the suite as rdma-core's run_tests.py does (tests/__init__.py's load_tests, the
# device given as --dev), and reports through a result class of its own, because unittest's
# verbose output splits a test's line around docstrings and anything a test prints:
#
#   PASS  tests.test_cq.CQAPITest.test_create_cq
#   SKIP  tests.test_odp.OdpTestCase.test_odp_rc_traffic: <the skip's message, one line>
#   FAIL  tests.test_mr.MWTest.test_mw_type1: <the exception, one line>   (then the traceback,
#         each line indented by four spaces)
#   == suite: 321 tests, 56 passed, 7 failed, 258 skipped, 412.3 s
#
# A subtest (TestCase.subTest) that fails is a FAIL line of its own, its id the test's with the
# subtest's parameters appended without spaces (TEST_ID(param=1)); unittest then gives the test
# itself no outcome, so a test with a failing subtest is not a PASS.  The summary line counts
# the lines above it: 60-rdma-core-suite.sh checks that they agree.
#
# A test that runs longer than PER_TEST_SECONDS (default 600) makes faulthandler print every
# thread's stack and end the process: a hang is reported where it is, not as a silent timeout.
import faulthandler
import os
import re
import sys
import time
import unittest
from importlib.machinery import SourceFileLoader


def one_line(text):
    return ' '.join(str(text).split())


class LineResult(unittest.TestResult):
    def __init__(self, per_test):
        super().__init__()
        self.per_test = per_test
        self.passed = 0
        self.failed = 0
        self.skipped_n = 0
        self.t0 = 0.0

    def startTest(self, test):
        super().startTest(test)
        self.t0 = time.monotonic()
        faulthandler.dump_traceback_later(self.per_test, exit=True)

    def stopTest(self, test):
        faulthandler.cancel_dump_traceback_later()
        super().stopTest(test)

    def _line(self, word, test, text=''):
        secs = time.monotonic() - self.t0
        tail = f': {one_line(text)}' if text else ''
        print(f'{word}  {test_id(test)} [{secs:.1f} s]{tail}', flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed += 1
        self._line('PASS', test)

    def _bad(self, test, err):
        self.failed += 1
        self._line('FAIL', test, f'{err[0].__name__}: {err[1]}')
        for line in self._exc_info_to_string(err, test).splitlines():
            print(f'    {line}', flush=True)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._bad(test, err)

    def addError(self, test, err):
        super().addError(test, err)
        self._bad(test, err)

    def addSubTest(self, test, subtest, err):
        # unittest's own only files a failing subtest away, and the test then has no outcome.
        super().addSubTest(test, subtest, err)
        if err is not None:
            self._bad(subtest, err)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.skipped_n += 1
        self._line('SKIP', test, reason or 'no reason given')

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.passed += 1
        self._line('PASS', test, 'expected failure')

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.failed += 1
        self._line('FAIL', test, 'unexpected success')


def test_id(test):
    """A test's id, one word: a subtest's (TestCase.subTest) is its test's and its parameters."""
    case = getattr(test, 'test_case', None)
    if case is None:
        return test.id()
    return case.id() + ''.join(test._subDescription().split())


def flatten(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from flatten(t)
        else:
            yield t


def main():
    tests_dir, dev = sys.argv[1], sys.argv[2]
    per_test = int(sys.argv[3]) if len(sys.argv) > 3 else 600
    only = re.compile(sys.argv[4]) if len(sys.argv) > 4 else None
    sys.path.insert(0, tests_dir)
    # The suite reads its options (--dev) through its own parser, from sys.argv.
    from args_parser import parser
    sys.argv = [os.path.join(tests_dir, 'run_tests.py'), '--dev', dev]
    parser.parse_args()
    tests = SourceFileLoader('tests', os.path.join(tests_dir, '__init__.py')).load_module()
    suite = unittest.defaultTestLoader.loadTestsFromModule(tests)
    if only:
        suite = unittest.TestSuite(t for t in flatten(suite) if only.search(t.id()))
    result = LineResult(per_test)
    t0 = time.monotonic()
    suite.run(result)
    total = result.passed + result.failed + result.skipped_n
    print(f'== suite: {total} tests, {result.passed} passed, {result.failed} failed, '
          f'{result.skipped_n} skipped, {time.monotonic() - t0:.1f} s', flush=True)
    return 1 if result.failed else 0


sys.exit(main())
