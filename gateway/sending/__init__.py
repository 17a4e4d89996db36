"""Getting a signed transaction onto the chain: the methods (``sendSmartTransaction``, ``sendAndConfirm``,
``getSendStatus``, the bundle relay), the legs that carry it (the node's RPC, a bundle relay, the leaders'
TPU over QUIC), the race that sends on all of them at once and polls until it lands, the racers and the
reconcile that settles every hold from the chain.
"""
