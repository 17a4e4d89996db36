"""The public documents (/health, /pricing, /capabilities) and their part of the API description."""
