"""The `stoke` console script of a pip install: runs the command-line tool
that the wheel carries in stoke/_bin/ (built with the extension, from the
same sources and version)."""
import os
import sys


def tool_path():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "stoke")


def main():
    path = tool_path()
    if not os.access(path, os.X_OK):
        sys.stderr.write(f"stoke: the command-line tool is not installed at {path} "
                         "(this package was not built by pip or the wheel)\n")
        return 127
    os.execv(path, ["stoke"] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
