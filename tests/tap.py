"""tap.py -- TAP output for the Python tests (python_module.py, python_torch.py):
ok, skip, raises, and done (the plan line and the exit status)."""
import sys

_n = 0
_failed = 0


def ok(cond, what):
    """One TAP line: `ok N - what`, or `not ok N - what` (counted as a failure)."""
    global _n, _failed
    _n += 1
    _failed += not cond
    print(('ok' if cond else 'not ok') + f' {_n} - {what}')


def skip(what, why):
    """One TAP line that passes as skipped, with the reason."""
    global _n
    _n += 1
    print(f'ok {_n} - {what} # SKIP {why}')


def raises(kind, fn, what, text):
    """fn() must raise `kind` whose message holds `text`; one TAP line with the message's first line."""
    try:
        fn()
    except kind as e:
        ok(text in str(e), f'{what} ({str(e).splitlines()[0]})')
        return
    except Exception as e:
        ok(False, f'{what}: raised {type(e).__name__}: {e}')
        return
    ok(False, f'{what}: nothing raised')


def done():
    """The plan line; exits 1 when a check failed."""
    print(f'1..{_n}')
    sys.exit(1 if _failed else 0)
