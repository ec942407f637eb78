"""python -m portcheck check <folder> | pair <torch.npy> <paddle.npy>: see portcheck.cli."""
import sys

try:
    from portcheck.cli import main
except KeyboardInterrupt:  # Ctrl-C while numpy loads: nothing read or written yet
    print("error: interrupted (Ctrl-C) while loading; nothing was written, run the command again [PC004]",
          file=sys.stderr)
    sys.exit(130)

main()
