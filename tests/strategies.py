"""What the property tests share: the random-tree strategies and the CUDA skip mark."""
from collections import deque

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


nested_labels = st.one_of(st.integers(-5, 5), st.text(max_size=4))


@st.composite
def nested_trees(draw, max_nodes=40, max_children=5):
    "Random nested (label, [children]) trees, built breadth-first with an explicit budget."
    budget = draw(st.integers(1, max_nodes))
    root = [draw(nested_labels), []]
    frontier, made = deque([root]), 1
    while frontier and made < budget:
        node = frontier.popleft()
        for _ in range(draw(st.integers(0, min(max_children, budget - made)))):
            child = [draw(nested_labels), []]
            node[1].append(child); frontier.append(child); made += 1

    def freeze(node):  # tiny trees only: recursion is fine in a test helper
        label, kids = node
        return (label, [freeze(k) for k in kids]) if kids else label
    return freeze(root)
