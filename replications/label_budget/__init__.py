"""The label-budget study, one module per study; its command is ``python -m replications.replicate_label_budget``.

* ``rules``: the rules and measurements, each fixed before any result of it was seen (``RULES``; the reports
  quote it).
* ``replication``: the replication proper, rules one to six and the shipped selectors, on either design
  (``label_budget.md``, ``label_budget_fullbatch.md``).
* ``ceiling``: the batch-sampling ceiling (``--ceiling``).
* ``fresh``: the fresh-draw rounds, the seventh to ninth rules and the tenth measurement (``--fresh [rule]``).
* ``intervals``: the coverage of the shipped posterior's intervals (``--intervals``).
* ``detectability``: how many pairs labels can order at all (``--detectability``).
* ``_core``: the budgets, groups, cases, seeds and draws every study shares; ``_report``: the pooled summary,
  tables and plot.
"""
