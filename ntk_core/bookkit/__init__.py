"""The book kit: what the chapters of the book use, apart from the library and the reproduction harness.

:mod:`~ntk_core.bookkit.ledger` (the ledger of claims: every check a chapter makes, with its status),
:mod:`~ntk_core.bookkit.claims` (the checks on the experiments' result tables, at every scale),
:mod:`~ntk_core.bookkit.compare` (a fresh run beside its medium record), :mod:`~ntk_core.bookkit.plots`
and :mod:`~ntk_core.bookkit.studies` (the seconds-long measurements of the theory chapters, and the study of
RDI and AUX in a user's own training loop). Nothing in the library or the harness imports from here.
"""
