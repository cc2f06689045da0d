"""broker/handlers"""
