__version__ = "0.1.0"
from . import readers          # attaches the readers (Tree.from_json, Tree.from_conllu, ...) to Tree
from . import yaml_reader      # and Tree.from_yaml
