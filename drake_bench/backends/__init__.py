"""Where a federation's client calls run: the interface the evaluator calls (``client_calls``), a method in its
own confined worker process (``worker_process``, ``confine``, ``descendants``), and Flower (``flower``).
"""
