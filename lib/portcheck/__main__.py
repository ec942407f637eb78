"""python -m portcheck check <folder> | pair <torch.npy> <paddle.npy>: see portcheck.cli."""
from portcheck.cli import main

main()
