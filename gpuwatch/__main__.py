"""``python -m gpuwatch``."""

from gpuwatch.cli.main import main

if __name__ == "__main__":
    main()
