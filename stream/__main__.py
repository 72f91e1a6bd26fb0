"""``python -m stream ...`` — same as the ``prefstream`` console script."""

from stream.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
