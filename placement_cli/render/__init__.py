"""Renderers: Report -> rich renderables or JSON text."""
