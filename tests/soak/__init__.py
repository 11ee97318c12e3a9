"""`make soak`: a fault campaign against the real daemon (`python -m tests.soak`); `make test` runs it at a tiny
scale (test_tiny_campaign.py, the fuzz phase left out) so it cannot rot.

Each phase drives a subprocess `hookserver serve` over its real sockets and injects one class of fault; the
campaign ends with a table of what was injected, what was answered in time, what failed or was lost, and the
RSS/fd/thread trend, plus a JSON report under build/soak/. See docs/operations.md for the promises it checks.
"""
