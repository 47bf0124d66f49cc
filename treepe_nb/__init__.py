__version__ = "0.1.0"
from . import readers          # attaches the readers (Tree.from_json, Tree.from_yaml, ...) to Tree
