"""ast_ad as a GradBench tool: one module per eval, each with the functions that eval calls.

Objectives are plain numpy, as a user would write them; derivatives come from ast_ad's public API.
"""
