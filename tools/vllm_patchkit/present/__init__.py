"""The present layer: the text and Markdown renderers of the judges' results.

Imports every layer below; never the workflows or the commands.
"""
