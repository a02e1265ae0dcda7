"""WMDP (Li et al. 2024): lm-eval's own tasks (``wmdp`` group, ``wmdp_bio``, ``wmdp_chem``, ``wmdp_cyber``); this
package only declares how ``unlearn report`` shows them."""
