"""Lightning modules for pretraining and fine-tuning, and their optimisation setup, one module each: import the
one you use (`from bertlab.lit.pretraining import PretrainingModule`), as a config's `_target_` names it. The
package imports none of them, so a run imports only its own task's module."""
