"""The method plugin contract: the protocol a method implements, the registry that finds methods through entry
points, the guard every evaluator call into a plugin goes through, and the example plugins that ship.
"""
