"""What the property tests share: the random-tree strategy and the CUDA skip mark."""
import pytest
import torch
from hypothesis import strategies as st

from treepe_nb.trees import Tree

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@st.composite
def random_trees(draw, max_nodes=40, max_branching=3, labels=None):
    """A random tree with at most `max_branching` children per node, from a random parent array; labels are the
    node ids, or drawn from `labels` (so that labels recur with several arities)."""
    n_nodes = draw(st.integers(1, max_nodes))
    parents, kids = [-1], [0]
    for v in range(1, n_nodes):
        free = [u for u in range(v) if kids[u] < max_branching]
        p = draw(st.sampled_from(free)); parents.append(p); kids.append(0); kids[p] += 1
    names = list(range(n_nodes)) if labels is None else [draw(st.sampled_from(labels)) for _ in range(n_nodes)]
    return Tree.from_parents(names, parents)
