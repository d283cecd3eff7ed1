"""The lazy expression DAG: the node family (``nodes.KINDS``), building nodes with numpy's
dtype rules, views pushed to the leaves, split/merge of computed values, and node text."""
