__version__ = "0.1.0"
"""treepe_nb: positional encodings for transformers on trees. The names a model of your own needs are here:
`from treepe_nb import TreeAPE, batch_positions, Tree` (the chapter "Your own transformer" shows the recipes)."""
from . import readers          # attaches the readers (Tree.from_json, Tree.from_conllu, ...) to Tree
from . import yaml_reader      # and Tree.from_yaml
from . import code_trees       # and Tree.from_code (tree-sitter is imported when a tree is read: the `code` extra)
from .trees import Tree, batch_positions
from .positions import TreePositions
from .token_positions import token_positions, token_nodes, token_kinds   # a tokenizer's tokens on a syntax tree
from .sequence import SinusoidalPE, LearnedPE, apply_rotary
from .stack import TreePositionalEncoding
from .additive import AdditiveTreePE
from .maps import PositionMaps
from .algebraic import SequenceAPE, TreeAPE, GridAPE, TreeMapCache
from .tracking import ArityVocab, TreeTracker
from .attention import ENCODINGS, PositionEncoding, MultiHeadAttention, register_encoding

_ON_FIRST_USE = {"TASKS": "tasks", "register_task": "tasks", "Run": "runs", "RunFolder": "runs", "decoder_batch": "batching"}

def __getattr__(name:str):
    """`TASKS`, `register_task`, `Run`, `RunFolder` and `decoder_batch` on first use: the task registry and run folders
    import the data pipelines (about 0.1 s more)."""
    if name in _ON_FIRST_USE:
        import importlib
        return getattr(importlib.import_module(f".{_ON_FIRST_USE[name]}", __name__), name)
    raise AttributeError(f"module 'treepe_nb' has no attribute {name!r}")

__all__ = ["Tree", "batch_positions", "TreePositions", "token_positions", "token_nodes", "token_kinds", "SinusoidalPE", "LearnedPE", "apply_rotary",
           "TreePositionalEncoding", "AdditiveTreePE", "PositionMaps", "SequenceAPE", "TreeAPE", "GridAPE", "TreeMapCache",
           "ArityVocab", "TreeTracker", "ENCODINGS", "PositionEncoding", "MultiHeadAttention", "register_encoding",
           "TASKS", "register_task", "Run", "RunFolder", "decoder_batch"]
