# hawk's version (project(hawk VERSION ...) in the top-level CMakeLists.txt); tests/test_cpu.py keeps them equal,
# and the library refuses to load when it was built from another one (_library.py).
__version__ = "0.1.0"
