"""Judges: was an answer a refusal? Offline rules and classifier, LLM judge, agreement with
people.
"""
