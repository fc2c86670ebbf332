"""pFedMMA (personalised multi-modal adapters with a shared cross-modal projection) as a drake_bench method.

``depths``: where the adapters sit (the instrumented blocks of each encoder and their pairing by relative depth);
``mma``: the adapter layer through peft's custom-module dispatch, with MMA's gradient-scale layer; ``accounting``:
the communication formula; ``plugin``: the ``pfedmma`` plugin and its controls. The method page is
docs/methods/pfedmma.md.
"""
