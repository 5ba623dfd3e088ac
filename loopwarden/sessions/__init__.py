"""Adapters: one per kind of agent, turning its stream into events and verdicts into its input.

Registered in `registry.py`; the contract they follow is `base.py`.
"""
